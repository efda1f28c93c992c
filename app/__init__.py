"""ctxsvc: prepares the input of every LLM call an agent makes."""
