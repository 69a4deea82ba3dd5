"""The bounds of every request, in one place: the CLI's options, the library's checks and the readers of
saved reports all read them here, so that what a command accepts is exactly what its reports may hold."""

MAX_K = 64  # draft depth: engines allocate K slots per sequence; no published drafter is run deeper
MAX_MIN_AL = MAX_K + 1.0  # a mean acceptance length is at most K + 1
MAX_TUNE_K = 16  # tune measures every K up to this: each is a full pass of the workload
MAX_NEW_TOKENS = 65536  # tokens generated per prompt
MAX_TEMPERATURE = 100.0
MAX_CONCURRENCY = 4096  # requests in flight (a load level), and the native engine's batch
MAX_LEVELS = 64  # load levels in one tune or --speedup run
MAX_MODEL_LEN = 1 << 24  # tokens of context a server may say it takes: past every published model's (10M at most)
MIN_MODEL_LEN = 16  # the shortest --max-model-len eaglezoo passes to vLLM: a prompt and a draft must fit
GPU_MEMORY_UTILIZATION = (0.01, 1.0)  # --gpu-memory-utilization: vLLM's share of each GPU's memory
# `registry update`: what one Hub snapshot of the registry may hold (today's: ~60 files, under 1 MiB in all)
MAX_REGISTRY_FILES = 10_000  # registry/*.yaml and registry/reports/*.json
MAX_REGISTRY_FILE_BYTES = 8 * 2**20  # one entry or kept report (a verify report of 80 prompts is ~50 KiB)
MAX_REGISTRY_BYTES = 64 * 2**20  # the whole snapshot: what its downloads may hold in all
MAX_PROMPTS = 100_000  # prompts in one prompt file, so rows in one report (MT-bench has 80, the largest suite 400)
MAX_REPORT_BYTES = 128 << 20  # a saved report's file: 1,000 prompts of 65,536 tokens each write about 80 MB
