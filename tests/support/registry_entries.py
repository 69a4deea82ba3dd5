"""Registry entries as YAML text, for tests that write a registry of their own."""

GOOD = """id: good
drafter: {repo: org/drafter}
target: {repo: org/target}
publisher: tests
eagle_version: "3"
sources: [tests]
"""
