"""Contract tests of the library workarounds in agent/upstream/, one file per module.

Each fails when an upgrade changes the behaviour a workaround was written for (a private
attribute gone, a signature changed, a parser's output shape changed, the upstream defect
fixed): then the workaround is reviewed (kept, adapted or removed), never applied blind.
"""
