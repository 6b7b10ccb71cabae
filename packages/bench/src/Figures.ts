/** What every benchmark script shares: its flags' values, and how it sums up samples. */

/** The value after `flag` on the command line, if given. */
export const flagValue = (flag: string): string | undefined => {
  const at = process.argv.indexOf(flag)
  return at === -1 ? undefined : process.argv[at + 1]
}

/** The middle sample (the upper of the two middle ones for an even count); NaN for none. */
export const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN

/** `x` to `digits` decimals. */
export const round = (x: number, digits = 1): number => Number(x.toFixed(digits))
