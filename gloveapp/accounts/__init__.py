"""A user's credentials beyond the password: the API tokens they hold (DRF's `authtoken`)."""
