// The words seeded data is made of: name words, tags, folder names and the kinds of files a
// media library holds (type, format, typical size), so lists, searches and filters meet the
// mix of a real library rather than "file-1", "file-2".

/** Name words; a name holds one or two, so each is in roughly 1% of names. */
// biome-ignore format: a word list reads best packed
export const WORDS = [
  'sunset', 'beach', 'mountain', 'forest', 'river', 'city', 'street', 'portrait', 'product', 'banner',
  'hero', 'logo', 'icon', 'team', 'office', 'event', 'launch', 'summer', 'winter', 'spring',
  'autumn', 'holiday', 'wedding', 'concert', 'festival', 'coffee', 'kitchen', 'garden', 'studio', 'interior',
  'exterior', 'aerial', 'night', 'morning', 'skyline', 'bridge', 'harbor', 'market', 'fashion', 'shoe',
  'handbag', 'watch', 'chair', 'table', 'lamp', 'poster', 'flyer', 'brochure', 'catalog', 'invoice',
  'report', 'contract', 'slide', 'deck', 'menu', 'recipe', 'travel', 'island', 'desert', 'snow',
  'rain', 'cloud', 'ocean', 'lake', 'park', 'flower', 'tree', 'bird', 'dog', 'cat',
  'horse', 'car', 'bike', 'train', 'plane', 'boat', 'pizza', 'burger', 'salad', 'cake',
  'wine', 'beer', 'tea', 'fruit', 'vegetable', 'model', 'runway', 'campaign', 'promo', 'sale',
  'lifestyle', 'headshot', 'family', 'kids', 'sport', 'football', 'tennis', 'yoga', 'fitness', 'museum',
] as const;

/** Tags, most common first (picked with Zipf weights). */
// biome-ignore format: a word list reads best packed
export const TAGS = [
  'approved', 'web', 'social', 'product', 'draft', 'final', 'print', 'hero', 'instagram', 'thumbnail',
  'lifestyle', 'banner', 'campaign-2024', 'campaign-2023', 'homepage', 'newsletter', 'catalog', 'press', 'internal',
  'archive', 'q1', 'q2', 'q3', 'q4', 'red', 'blue', 'green', 'black', 'white', 'summer-sale', 'winter-sale',
  'black-friday', 'outdoor', 'indoor', 'studio', 'portrait', 'landscape', 'square', 'vertical', 'retouched', 'raw',
  'licensed', 'stock', 'ugc', 'partner', 'event', 'team', 'brand', 'logo', 'icon', 'video', 'animation', 'gif',
  'mobile', 'desktop', 'email', 'ads', 'facebook', 'tiktok', 'youtube', 'linkedin', 'pinterest', 'blog', 'seo',
  'review', 'rejected', 'needs-crop', 'needs-alt', 'high-res', 'low-res', 'cmyk', 'rgb', 'transparent', 'dark',
  'light', 'minimal', 'colorful', 'vintage', 'modern', 'nature', 'urban', 'food', 'drink', 'travel', 'fashion',
  'beauty', 'tech', 'sports', 'kids', 'pets', 'holiday', 'christmas', 'easter', 'halloween', 'valentines',
  'spring-collection', 'fall-collection', 'sku-linked', 'legal', 'contract', 'invoice', 'report', 'slides',
] as const;

/** The ten top-level folders of a big workspace. */
// biome-ignore format: a word list reads best packed
export const TOP_FOLDERS = [
  'Marketing', 'Products', 'Brand', 'Events', 'Photography', 'Social', 'Website', 'Press', 'Archive', 'Clients',
] as const;

/** Fourth-level folders: a stage of work. */
export const STAGES = ['raw', 'edited', 'final', 'selects', 'exports'] as const;

// biome-ignore format: a word list reads best packed
export const PHOTOGRAPHERS = [
  'Ana Silva', 'Ben Carter', 'Chen Wei', 'Dara Okafor', 'Elena Rossi', 'Farid Haddad', 'Grace Kim', 'Hugo Martin',
  'Ines Duarte', 'Jonas Berg', 'Kofi Mensah', 'Lena Novak', 'Mia Tanaka', 'Noah Fischer', 'Olga Petrova',
] as const;

export interface FileKind {
  ext: string;
  mime: string;
  /** What the content sniffing of media/detect.ts says (file-type's ext), or the extension. */
  format: string;
  /** Median size in bytes, and the spread (log-normal sigma). */
  median: number;
  sigma: number;
  /** Images carry dimensions. */
  image: boolean;
  weight: number;
}

const KiB = 1024;
const MiB = 1024 * KiB;

export const KINDS: FileKind[] = [
  { ext: 'jpg', mime: 'image/jpeg', format: 'jpg', median: 800 * KiB, sigma: 0.8, image: true, weight: 45 },
  { ext: 'png', mime: 'image/png', format: 'png', median: 400 * KiB, sigma: 1, image: true, weight: 18 },
  { ext: 'webp', mime: 'image/webp', format: 'webp', median: 150 * KiB, sigma: 0.7, image: true, weight: 8 },
  { ext: 'gif', mime: 'image/gif', format: 'gif', median: 500 * KiB, sigma: 1, image: true, weight: 2 },
  { ext: 'svg', mime: 'image/svg+xml', format: 'svg', median: 20 * KiB, sigma: 0.8, image: true, weight: 2 },
  { ext: 'mp4', mime: 'video/mp4', format: 'mp4', median: 40 * MiB, sigma: 1.2, image: false, weight: 6 },
  { ext: 'mov', mime: 'video/quicktime', format: 'mov', median: 120 * MiB, sigma: 1, image: false, weight: 2 },
  { ext: 'pdf', mime: 'application/pdf', format: 'pdf', median: 1 * MiB, sigma: 1, image: false, weight: 10 },
  { ext: 'zip', mime: 'application/zip', format: 'zip', median: 20 * MiB, sigma: 1.2, image: false, weight: 2 },
  {
    ext: 'docx',
    mime: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    format: 'docx',
    median: 200 * KiB,
    sigma: 0.8,
    image: false,
    weight: 3,
  },
  { ext: 'mp3', mime: 'audio/mpeg', format: 'mp3', median: 5 * MiB, sigma: 0.6, image: false, weight: 2 },
];

/** Common image sizes (width x height). */
// biome-ignore format: a word list reads best packed
export const DIMENSIONS: [number, number][] = [
  [6000, 4000], [4032, 3024], [3840, 2160], [2048, 1365], [1920, 1080], [1600, 1200], [1200, 1200], [1080, 1920],
  [1080, 1080], [800, 600], [512, 512], [256, 256],
];
