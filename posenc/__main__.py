from posenc.cli.app import main

main()
