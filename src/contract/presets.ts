// Transformation presets (/api/v1/presets): a workspace's named transformations, used in
// delivery URLs as `t_{name}` (docs/api/presets.md).
import { type Static, Type } from 'typebox';
import { EXAMPLE_PRESET } from './examples.ts';

const NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,63}$';

export const Preset = Type.Object(
  {
    name: Type.String({ pattern: NAME_PATTERN, description: 'Used in delivery URLs as t_{name}' }),
    transformation: Type.String({ description: 'Comma-separated tokens, as stored (each token trimmed)' }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { examples: [EXAMPLE_PRESET] },
);
export type Preset = Static<typeof Preset>;

export const PresetAnswer = Type.Object({ success: Type.Literal(true), data: Preset });

export const PresetListData = Type.Object({
  presets: Type.Array(Preset, { description: 'By name' }),
  max_presets: Type.Integer({ description: 'How many presets a workspace may have', examples: [100] }),
});
export type PresetListData = Static<typeof PresetListData>;

export const PresetList = Type.Object({ success: Type.Literal(true), data: PresetListData });

export const PresetParams = Type.Object({
  name: Type.String({
    pattern: NAME_PATTERN,
    description: 'Lower-case letters, digits, "_" and "-", starting with a letter or digit; at most 64',
  }),
});

export const PresetPutBody = Type.Object(
  {
    transformation: Type.String({
      minLength: 1,
      maxLength: 4096,
      description:
        'Comma-separated transformation tokens (w_400,h_400,c_fill), checked as delivery would read them; no t_ tokens; at most 1,024 characters once each token is trimmed',
    }),
  },
  { additionalProperties: false, examples: [{ transformation: EXAMPLE_PRESET.transformation }] },
);
export type PresetPutBody = Static<typeof PresetPutBody>;
