"""Local stand-ins at the seams: HTTP servers on 127.0.0.1 that speak vendors' wire formats."""
