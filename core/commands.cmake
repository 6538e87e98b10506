# Sources of the `ganflow` command's subcommands (each part adds its own).
target_sources(ganflow_cmd PRIVATE)
