/** @rx/cli: the `rx` command, for embedding or extension. */
export * as Approval from "./Approval.js"
export * as Cli from "./Cli.js"
export * as Commands from "./Commands.js"
export * as Demo from "./Demo.js"
export * as ExitCode from "./ExitCode.js"
export * as Progress from "./Progress.js"
export * as Render from "./Render.js"
export * as Usage from "./Usage.js"
