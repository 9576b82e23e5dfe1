"""The client side of the testing API (eval harness, CI gate): it talks to a server over
HTTP and imports nothing of it, so it can run anywhere the server's address is known."""
