/** The `rx` command: @effect/cli runs it (`Cli`), any error is rendered as one line, the process exits with its code. */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Cause, Effect, Exit, Fiber, Layer, Option, Ref } from "effect"
import * as Cli from "./Cli.js"
import { ExitStatus } from "./Commands.js"
import * as ExitCode from "./ExitCode.js"
import { listener } from "./internal/interrupt.js"
import * as Output from "./internal/output.js"
import * as Telemetry from "./internal/telemetry.js"
import * as Render from "./Render.js"
import { version } from "./Usage.js"

const status = Ref.unsafeMake(0)

// Tracing, when the OTEL_ variables ask for it, spans the whole command; its scope closes (the
// last spans sent) before the process exits.
const program = Cli.main(process.argv).pipe(
  Effect.provide(Layer.mergeAll(NodeContext.layer, Cli.config, Layer.succeed(ExitStatus, status), Output.layer)),
  Effect.provide(Telemetry.layer(process.env, version))
)

const fiber = Effect.runFork(program)
process.on("SIGINT", listener(() => Effect.runFork(Fiber.interrupt(fiber))))

/** One line a user can act on; the stack only with RX_DEBUG=1. */
const describe = (cause: Cause.Cause<unknown>): string | undefined => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const error = failure.value
    if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") return error.message
    return String(error)
  }
  if (Cause.isInterruptedOnly(cause)) return "interrupted"
  const defect = Cause.squash(cause)
  return `internal error: ${defect instanceof Error ? defect.message : String(defect)} (RX_DEBUG=1 shows the details)`
}

/**
 * Once the command has ended (its scopes closed), what it abandoned (a connection attempt to a
 * database that does not answer, which nothing can cancel) does not keep the process alive. What
 * it wrote is not cut: where stdout is asynchronous (a pipe on macOS) the exit waits for it.
 */
const lingerMs = 1_000
const exitOnceWritten = (): void => {
  if (process.stdout.writableLength === 0 && process.stderr.writableLength === 0) return process.exit()
  setTimeout(exitOnceWritten, 50).unref()
}

fiber.addObserver((exit) => {
  setTimeout(exitOnceWritten, lingerMs).unref()
  if (Exit.isSuccess(exit)) {
    process.exitCode = Ref.get(status).pipe(Effect.runSync)
    return
  }
  const message = describe(exit.cause)
  if (message !== undefined) Output.err(`rx: ${Render.terminal(Render.cap(message, 4_000))}\n`)
  if (process.env["RX_DEBUG"] === "1") Output.err(`${Cause.pretty(exit.cause)}\n`)
  process.exitCode = Cause.isInterruptedOnly(exit.cause) ? ExitCode.interrupted : ExitCode.failure
})
