"""The commands' work as library functions (issue 22 item 2): one call per CLI command.

Each `extradeep <command>` parses its flags into one options value, makes one call here and only
formats what comes back; the GUI calls the same functions. A workflow resolves and checks its
options once (errors name the option), does the reading, modeling and analysis, and returns a
result dataclass of dataframes and fitted models; it prints nothing and writes only the outputs
it is asked for.
"""
