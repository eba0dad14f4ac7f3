"""Approvals: a person decides on exactly what a tool will run (an addition to Glove).

A tool declares an `ApprovalPolicy`: which decisions a person may take, who decides, and
its deadlines. Before such a tool runs, the executor hands the call over as an approval
prompt (renderer `approval_request`) carrying the `fingerprint` of the tool name and its
canonical arguments, and waits for a `Decision`:

- approve: the tool runs with exactly the arguments that were fingerprinted;
- edit: the tool runs with the person's arguments, validated against its input schema;
- reject: the tool does not run; the agent reads the reason;
- respond: the tool does not run; the agent reads the person's text as the call's result
  (Glove's resolution), not as an error.

A request nobody decides in time is decided by its `on_expire`; a rejection then reads
"expired", never "rejected by a person".

A decision names the fingerprint it saw; one for other arguments is refused, and the tool
never runs without a decision. Everything here is plain Python: the Django side stores the
requests and decisions (`gloveapp.approvals`), the executor only checks and obeys.

One subject per module: `decisions` (the vocabulary, a `Decision`, its checks and what the
agent reads of one that does not run the tool), `policy` (what a tool declares and the
prompt it hands over), `edits` (an edit's arguments checked, and what it changed), `inbox`
(the decisions on inbox items) and `permissions` (permission prompts in this vocabulary).
"""
