"""The recall benchmark: synthetic histories (`generate`) and, elsewhere, the runner that scores them."""
