"""find_files and search: globs as RE2, the tree walk (.gitignore, binaries), ripgrep or the Python walk."""
