"""The approval page: URL-mode elicitation decided by an approver in a browser."""
