"""What staff tools and signed webhooks call: `/api/approvals/` and `/api/inbox/resolve`."""
