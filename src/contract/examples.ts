// Example values for the OpenAPI document: one workspace, one uploaded photo, its folder, a
// source, a preset. Each is what the API answers (taken from a real run and tidied), so the
// examples agree with one another and with the schemas they annotate (the linter checks that).
const WS = 'q3Vb8xL0aZ1k';
const BASE = 'https://media.example.com';
const AT = '2026-03-14T09:26:53.589Z';

export const EXAMPLE_FILE = {
  id: '8f2b8f8f-cbee-4b7b-ac51-5ad306391bb7',
  file_no: 'fZRdebbpdLIz',
  workspace_id: WS,
  name: 'shoe.jpg',
  path: '/products/shoes/shoe.jpg',
  url: `${BASE}/${WS}/products/shoes/shoe.jpg`,
  width: 1200,
  height: 800,
  size: 184_322,
  mime_type: 'image/jpeg',
  tags: ['summer', 'sale'],
  metadata: { sku: 'SH-1042' },
  custom_id: 'sku-SH-1042',
  folder_no: 'Zsvoydp2udT5',
  is_duplicate: false,
  created_at: AT,
  upload_source: 'direct',
  thumbnail: `${BASE}/${WS}/w_200,h_200,c_fit/products/shoes/shoe.jpg`,
  extension: 'jpg',
  format: 'jpg',
  hash: 'e26ac8b1701195c47c5d087a04edad31342fd13783200550cad619a8337e6361',
  is_private: false,
  file_size: 184_322,
  workspace_no: WS,
  source: 'direct',
  folder_name: 'shoes',
  updated_at: AT,
  thumbanil: `${BASE}/${WS}/w_200,h_200,c_fit/products/shoes/shoe.jpg`,
  meta_data: { sku: 'SH-1042' },
  folder_id: 'f8ef89cc-1c3d-4ca0-b2e2-e2d5c0ce0a35',
  // A photo: the video and audio fields the upload probe fills stay null.
  duration: null,
  media: null,
};

export const EXAMPLE_FILE_DETAILS = {
  ...EXAMPLE_FILE,
  dimensions: { width: 1200, height: 800 },
  workspace: { name: 'Shop', workspace_no: WS },
  folder: { folder_no: 'Zsvoydp2udT5', name: 'shoes', path: 'products/shoes' },
  uploaded_by: null,
  uploaded_at: AT,
  asset_key: EXAMPLE_FILE.file_no,
  asset_url: EXAMPLE_FILE.url,
};

export const EXAMPLE_FOLDER = {
  id: 'f8ef89cc-1c3d-4ca0-b2e2-e2d5c0ce0a35',
  folder_no: 'Zsvoydp2udT5',
  name: 'shoes',
  parent_folder_no: '3GbrPS1g4BQX',
  parent_folder: 'ff91670b-b985-43a3-ab1b-8ab68908e48a',
  workspace_id: WS,
  workspace_no: WS,
  workspace: { workspace_no: WS },
  is_active: true,
  is_delete: false,
  path: 'products/shoes',
  total_items: 1,
  total_size: 184_322,
  created_at: AT,
  updated_at: AT,
};

export const EXAMPLE_SOURCE = {
  id: 'fd1576ee-866d-4585-a7a9-d5aaac5d435a',
  name: 'catalogue',
  type: 'image_source',
  configuration: { base_url: 'https://images.example.com', forward_header: false },
  is_active: true,
  created_at: AT,
  updated_at: AT,
};

export const EXAMPLE_PRESET = {
  name: 'thumb',
  transformation: 'w_200,h_200,c_fill,f_auto',
  created_at: AT,
  updated_at: AT,
};

export const EXAMPLE_WORKSPACE = {
  workspace_id: WS,
  name: 'Shop',
  allowed_origins: ['https://shop.example.com'],
  webhook_origins: [],
  signed_transformations: false,
  quota_bytes: 10_737_418_240,
  max_file_size: 104_857_600,
  used_bytes: 184_322,
  reserved_bytes: 0,
};

const SESSION = 'onP5PII4iYWNM9T3zUKjDJA5';
const partUrl = (n: number) =>
  `${BASE}/api/v1/multipart/${SESSION}/parts/${n}?length=8388608&expires=1774085213&signature=UZ1m6MXWNejGtF34Kv6qgsGCFWZrlXNshhOCH-i8UoA`;

export const EXAMPLE_MULTIPART_SESSION = {
  session_id: SESSION,
  uuid: '38260f68-87e9-4168-90b0-42c1b889aaeb',
  part_size: 8_388_608,
  min_part_size: 5_242_880,
  parts: [partUrl(1), partUrl(2), partUrl(3)],
  expire_at: 1_774_085_213,
  public_key: 'stw_pk_…zaW5',
  workspace_id: WS,
  policy: { folder: 'videos', tags: ['launch'], size: 20_971_520, format: 'video/mp4' },
};

export const EXAMPLE_SESSION_STATUS = {
  session_id: SESSION,
  status: 'active',
  part_size: 8_388_608,
  size: 20_971_520,
  expire_at: 1_774_085_213,
  uploaded_parts: [{ part_number: 1, size: 8_388_608, etag: '"78af5f94892f3950"' }],
};

const TOKEN = 'stw_ut_2MiV5VfH4JiA5iELcvVXWf.RotUPGRHd0orS3xvDyXPiPzyUtU-dY1zbqp_p3ae5oE';
export const EXAMPLE_UPLOAD_TOKEN = {
  token: TOKEN,
  signature: 'RotUPGRHd0orS3xvDyXPiPzyUtU-dY1zbqp_p3ae5oE',
  expire_at: 1_773_480_713,
  public_key: 'stw_pk_…zaW5',
  workspace_id: WS,
  upload_url: `${BASE}/api/v1/uploads/${TOKEN}`,
  policy: {
    file_name: 'avatar.png',
    folder: 'avatars',
    tags: ['profile'],
    max_file_size: 5_242_880,
    transform: 'w_512,h_512,c_fill',
    allow_override: { folder: false, tags: true, transform: false },
  },
};

export const EXAMPLE_SIGNED_URL = {
  url: `${BASE}/${WS}/w_800/products/shoes/shoe.jpg?expires=1773484313&signature=Jx0m8d2bqkO7cV4rS1yT6uW9zA3eF5gH7iK9lM1nP2Q`,
  expires_at: 1_773_484_313,
};

export const EXAMPLE_DELIVERY_KEY = { delivery_key: 'stw_dk_7Hq2Lm9Xv4Rt8Yw1Za3Kb6Nc5Pd0Se2Fg4Uj7Vi9WoX' };

/** A workspace id and a file path, for the delivery URL's parameters. */
export const EXAMPLE_WORKSPACE_ID = WS;

export const EXAMPLE_KEY = {
  id: '0b6f8f3e-2f4c-4c55-9d0e-6a1c1b9f2e7d',
  workspace_id: WS,
  type: 'public' as const,
  hint: 'stw_pk_…Xq3Z',
  created_at: AT,
  revoked_at: null,
  active: true,
};

export const EXAMPLE_DELIVERY = {
  id: 'msg_2aT9qLx0VbN4mK8sR1cW7yZpE3f',
  event: 'upload.completed',
  file_no: EXAMPLE_FILE.file_no,
  url: 'https://shop.example.com/hooks/stowage',
  status: 'delivered' as const,
  attempts: 1,
  last_status: 204,
  last_error: null,
  next_attempt_at: null,
  created_at: AT,
  updated_at: AT,
};
