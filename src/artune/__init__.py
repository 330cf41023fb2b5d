"""artune."""
