"""Logging in: the login page (with the demo's logins while they still work) and the favicon."""
