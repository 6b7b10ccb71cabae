/** Worker processes running test/fixtures/worker.mjs on the built packages (as store-pg's test children); free ports for them. */
import { Effect, type Scope } from "effect"
import * as net from "node:net"
import { fileURLToPath } from "node:url"
import { type Child, startScript } from "../../store-pg/test/processes.js"

export type { Child }

const script = fileURLToPath(new URL("./fixtures/worker.mjs", import.meta.url))

/** Start `node worker.mjs <args>`; SIGKILLed with the scope if still running. */
export const start = (args: ReadonlyArray<string>): Effect.Effect<Child, never, Scope.Scope> => startScript(script, args)

/** A TCP port nothing listens on now, on 127.0.0.1. */
export const freePort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const server = net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})
