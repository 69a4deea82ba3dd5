"""The Hugging Face Hub through its official client: bounded calls, pull, push, remote reading, model cards."""
