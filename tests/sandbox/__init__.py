"""The sandbox: the operating-system wall and the language policy, each shown to hold."""
