/** The `rx` command: `Cli.main` runs it (every error said as one line), the process exits with its code. */
import * as Cli from "./Cli.js"
import * as Telemetry from "./internal/telemetry.js"
import { version } from "./Usage.js"

// Tracing, when the OTEL_ variables ask for it, spans the whole command; its scope closes (the
// last spans sent) before the process exits.
Cli.runMain(Cli.main(process.argv), { layer: Telemetry.layer(process.env, version) })
