"""The reader fuzzer: seed corpus, mutations, a long-lived worker and the campaign driver.

``python -m tests.fuzz.campaign --help`` runs a campaign of any length; ``test_fuzz.py`` runs
a short, seeded one in CI. ``python -m tests.fuzz.seeds`` rebuilds the committed seeds.
The folder fuzzer (``folders``: hostile manifests, file kinds, links and numbers in a small
collected folder, ``folder_corpus/``) runs beside it: ``python -m tests.fuzz.campaign
--folders --minutes 10``; ``python -m tests.fuzz.folders`` collects its seed anew.
"""
