from safedb.cli import main

main(prog_name="safedb")
