import { Effect, Layer, Schema } from "effect"
import { Event, LanguageModel, Options, Tool, ToolRegistry } from "@rx/kernel"

/** The kernel's `echo` tool: echoes its input, idempotent. */
export const echo = Tool.echo

/** A model that echoes `n` times (each answer after a short sleep, so runs interleave), then is done. */
export const echoModel = (n: number, pauseMs = 0) =>
  LanguageModel.layerScripted([
    ...Array.from({ length: n }, (_, i) => () =>
      Effect.as(Effect.sleep(pauseMs), LanguageModel.callTool("echo", { text: `t${i}` }))),
    LanguageModel.done("echoed")
  ])

/** Registry and model for a run of `n` echo calls. */
export const echoRun = (n: number, pauseMs = 0) => Layer.merge(ToolRegistry.layer([echo]), echoModel(n, pauseMs))

/** A `GoalSubmitted` for `goalId` with the echo tool, as a runner would append it. */
export const submitted = (goalId: string, options: Options.Input = {}): Event.Event => ({
  _tag: "GoalSubmitted",
  goalId,
  seq: 0,
  iteration: 0,
  at: 1_000,
  goal: "echo things",
  options: Schema.decodeSync(Options.Options)(options),
  tools: [echo.spec],
  behaviour: 2
})

/** Seqs are 0..n-1 and exactly one Terminated ends the log. */
export const contiguous = (events: ReadonlyArray<Event.Event>) => events.every((e, i) => e.seq === i)
export const endsOnce = (events: ReadonlyArray<Event.Event>) =>
  events.filter((e) => e._tag === "Terminated").length === 1 && events[events.length - 1]?._tag === "Terminated"
