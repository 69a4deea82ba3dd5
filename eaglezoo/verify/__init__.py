"""Running a drafter against its target: the workload, the engines (native, vLLM, a server) and one report."""
