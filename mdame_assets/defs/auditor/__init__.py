"""The Strategic Auditor: the weekly report per dimension."""
