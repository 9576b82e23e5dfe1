"""Hand-written wrong and correct agents against the built-in scenarios, over HTTP."""
