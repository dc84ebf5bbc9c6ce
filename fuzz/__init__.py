"""kproto's coverage-guided fuzz harnesses (atheris); see docs/reliability.md and fuzz/run_all.py."""
