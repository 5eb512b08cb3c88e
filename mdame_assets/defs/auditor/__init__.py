"""The Strategic Auditor: the weekly report per dimension (issue 12)."""
