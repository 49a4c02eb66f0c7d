"""This project's own gate content: a package named `gates`, as the README suggests users name theirs."""
