"""Registry entries as YAML text, for tests that write a registry of their own."""

GOOD = """id: good
drafter: {repo: org/drafter}
target: {repo: org/target}
publisher: tests
eagle_version: "3"
sources: [tests]
"""

# Every condition a figure states (registry/conditions.py), unknown where its source does not say it.
UNKNOWN_CONDITIONS = {
    "k": "unknown",
    "k_spelling": "unknown",
    "drafting": "unknown",
    "temperature": "unknown",
    "top_p": "unknown",
    "dataset": "unknown",
    "dataset_size": "unknown",
    "max_new_tokens": "unknown",
    "engine": "unknown",
    "engine_version": "unknown",
    "thinking": "unknown",
    "prompt_format": "unknown",
    "source": "https://example.org/figures",
}


def figure(value, metric="acceptance_length", definition="unknown", extra="", **conditions) -> str:
    """One reported figure as a YAML flow mapping (a list item's body), with every condition stated."""
    stated = {**UNKNOWN_CONDITIONS, **conditions}
    body = ", ".join(f"{k}: {v}" for k, v in stated.items())
    return f"{{metric: {metric}, definition: {definition}, value: {value}, conditions: {{{body}}}{extra}}}"
