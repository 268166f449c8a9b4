from cli.bench import main

main()
