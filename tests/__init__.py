"""The test suite. Requirement ids cited in test names and comments (W1–W11, Q1–Q14) are written out in
``docs/requirements.md``; ``-m "not e2e"`` leaves out the tests that spawn real processes."""
