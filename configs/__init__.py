"""The Hydra config tree, shipped as a package so it is found in any kind of install."""
