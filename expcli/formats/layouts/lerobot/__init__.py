"""LeRobot v3.0 dataset folders: ``layout`` reads and writes them.

The private modules are its features, its rows and its videos.
"""
