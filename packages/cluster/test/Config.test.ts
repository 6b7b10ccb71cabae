/** The configuration is decoded before anything opens: defaults are documented values, bad ones are named. */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Config } from "@rx/cluster"

describe("Config", () => {
  it.effect("a worker's defaults: failover 15 s, the log's pool 10, 8 goals at once", () =>
    Effect.gen(function*() {
      const config = yield* Config.decodeWorker({ url: "postgres://rx:secret@db:5432/rx", host: "10.0.0.5", port: 34431 })
      expect(config).toMatchObject({
        failoverMs: 15_000,
        refreshAssignmentsMs: 1_000,
        pollMs: 2_000,
        shardsPerGroup: 300,
        maxConnections: 10,
        clusterConnections: 5,
        concurrency: 8,
        store: {}
      })
    }))

  it.effect("bad values are named, and the URL's password is not shown", () =>
    Effect.gen(function*() {
      const failed = yield* Effect.either(Config.decodeWorker({
        url: "mysql://rx:secret@db/rx",
        host: "",
        port: 70_000,
        failoverMs: 0
      }))
      expect(Either.isLeft(failed)).toBe(true)
      if (Either.isRight(failed)) return
      const message = failed.left.message
      for (const field of ["url", "host", "port", "failoverMs"]) expect(message).toContain(field)
      expect(message).not.toContain("secret")
    }))

  it.effect("a client needs only the URL", () =>
    Effect.gen(function*() {
      const config = yield* Config.decodeClient({ url: "postgres://rx@db/rx", failoverMs: 4_000 })
      expect(config.failoverMs).toBe(4_000)
    }))
})
