"""`eaglezoo doctor`: why is acceptance low on this server? A verdict, its cause and the fix, shown by trying it.

Data flow (`run.diagnose`): what the server says about itself (`verify.endpoint.server_facts`) or the deployment
eaglezoo starts (`deployment.py`) -> the same prompts measured on it -> what its files make the engine do, against
the drafter and target named (`suspects.py`, `fit.py`) -> the native reference run once per target, the drafter
judged as served, as named, and with each suspected cause fixed alone (`trials.py`) -> findings and one verdict
(`verdict.py`) in a typed report (`report.py`). The server only ever receives requests.
"""
