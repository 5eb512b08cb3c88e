"""Daily housekeeping (issue 12, retention): media collected by policy, scratch swept, disk
use measured, low disk alerted."""
