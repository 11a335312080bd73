"""The reader fuzzer: seed corpus, mutations, a long-lived worker and the campaign driver.

``python -m tests.fuzz.campaign --help`` runs a campaign of any length; ``test_fuzz.py`` runs
a short, seeded one in CI. ``python -m tests.fuzz.seeds`` rebuilds the committed seeds.
"""
