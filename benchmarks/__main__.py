from posenc.cli.bench import main

main()
