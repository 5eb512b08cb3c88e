"""Daily housekeeping: media collected by policy, scratch swept, disk
use measured, low disk alerted."""
