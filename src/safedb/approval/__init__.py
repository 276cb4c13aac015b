"""What a human is asked, what they answered, and whether that answer lets the statement run."""
