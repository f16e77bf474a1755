/** The Dockerfile read as the tests need it: its stages, an instruction's exec form, the variables it sets. */

export interface Instruction {
  readonly keyword: string
  readonly argument: string
}

/** The Dockerfile's instructions, stage by stage (a stage starts at FROM); comments dropped, continued lines joined. */
export function dockerfileStages(text: string): Instruction[][] {
  const stages: Instruction[][] = []
  const lines = text.replace(/\\\n/g, ' ').split('\n')
  for (const line of lines) {
    const match = /^\s*([A-Z]+)\s+(.*)$/.exec(line)
    if (match === null) continue
    const instruction = { keyword: match[1] as string, argument: (match[2] as string).trim() }
    if (instruction.keyword === 'FROM') stages.push([])
    stages.at(-1)?.push(instruction)
  }
  return stages
}

/** An instruction's exec form (a JSON array of strings); anything else fails the test. */
export function execForm(stage: Instruction[], keyword: string): string[] {
  const found = stage.filter((instruction) => instruction.keyword === keyword)
  if (found.length !== 1) throw new Error(`the final stage needs exactly one ${keyword}`)
  return JSON.parse((found[0] as Instruction).argument) as string[]
}

/** The variables the stage's ENV instructions set (`NAME=VALUE` pairs, unquoted). */
export function imageEnv(stage: Instruction[]): Record<string, string> {
  const pairs = stage
    .filter((instruction) => instruction.keyword === 'ENV')
    .flatMap((instruction) => instruction.argument.split(/\s+/))
  return Object.fromEntries(pairs.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]))
}
