// `--name value` and `--flag` command-line options for scripts/seed.ts and bench/scale.ts.
export class Args {
  private readonly values = new Map<string, string>();
  private readonly flags = new Set<string>();

  constructor(argv: string[], booleans: string[] = []) {
    for (let i = 0; i < argv.length; i++) {
      const arg = argv[i];
      if (!arg.startsWith('--')) throw new Error(`unexpected argument "${arg}"`);
      const [name, inline] = arg.slice(2).split(/=(.*)/s, 2);
      if (booleans.includes(name)) this.flags.add(name);
      else if (inline !== undefined) this.values.set(name, inline);
      else if (i + 1 < argv.length) this.values.set(name, argv[++i]);
      else throw new Error(`--${name} needs a value`);
    }
  }

  string(name: string, fallback: string): string;
  string(name: string): string | undefined;
  string(name: string, fallback?: string): string | undefined {
    return this.values.get(name) ?? fallback;
  }

  /** A count; accepts 1000000, 1_000_000, 1e6, 10k and 1M. */
  number(name: string, fallback: number): number {
    const raw = this.values.get(name);
    if (raw === undefined) return fallback;
    const m = /^([\d_.e+]+)([kKmM]?)$/.exec(raw);
    const n = m ? Number(m[1].replaceAll('_', '')) * ({ k: 1e3, m: 1e6 }[m[2].toLowerCase()] ?? 1) : Number.NaN;
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number (got "${raw}")`);
    return n;
  }

  list(name: string, fallback: number[]): number[] {
    const raw = this.values.get(name);
    return raw === undefined ? fallback : raw.split(',').map((s) => Number(s.trim()));
  }

  flag(name: string): boolean {
    return this.flags.has(name);
  }
}
