"""An example powercut power driver (see driver.py)."""
