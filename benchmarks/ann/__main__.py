from benchmarks.ann.run import main

raise SystemExit(main())
