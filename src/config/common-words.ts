/**
 * A small word list for the admin-token strength check (config/token-strength.ts): the passwords people type most
 * and common English words a passphrase is made of. Not a dictionary: a token built from these is found cheaply,
 * anything else is judged by its length and character classes.
 */
const words = `
password passwd passw0rd admin administrator root toor token secret secrets changeme change letmein welcome
default guest user login logon master access qwerty qwertz azerty asdf asdfgh zxcvbn iloveyou trustno1 abc123
monkey dragon shadow sunshine princess football baseball soccer hockey batman superman starwars pokemon
michael jordan charlie thomas jessica ashley daniel george hunter ranger buster tigger pepper ginger
modelgate gateway inference server service openai llama model models api apikey key keys bearer auth
metrics prometheus grafana docker compose kubernetes postgres postgresql redis config production staging
test testing tests example sample demo local localhost internal private public company office
hello world foobar spam eggs lorem ipsum dolor amet
correct horse battery staple
about above after again against almost alone along already also always among another answer anything
apple area army around away baby back ball bank base beach bear beat beautiful because become been before
began begin behind being believe below best better between big bird black blood blue board boat body book
born both bottom bought box boy bread break bright bring broken brother brown build building built burn
business busy call came camp cannot capital captain card care carry case castle catch cause cell center
certain chair chance change charge cheese chicken child children choose church circle city class clean
clear climb clock close cloud coast cold color come common computer control cook cool copy corner cost
could count country course cover cross crowd cry current cut dance dark data date daughter dead deal dear
death decide deep design desk detail develop didn't die different dinner direct doctor does dollar done door
double down draw dream dress drink drive drop during each early earth east easy edge eight either else
empty energy engine enough enter equal even evening event ever every everything exact except expect
experience explain face fact fair fall family famous farm fast father fear feel feet field fight figure
fill final find fine finger finish fire first fish five floor flower fly follow food foot force forest
forget form forward found four free fresh friend from front fruit full game garden gave general gentle
girl give glass gold golden good got government grass great green ground group grow guess guitar half hand
happy hard have head hear heard heart heat heavy held help here high hill history hold hole holiday home
hope horse hospital hot hotel hour house however huge human hundred hungry idea important inside instead
iron island issue join journey judge jump just keep kind king kitchen knew know land language large last
late laugh lead learn leave left less letter level life light like line list listen little live long look
lost love lower lucky machine made magic main make many market matter maybe mean measure meet member memory
middle might mile milk mind minute miss moment money month moon more morning most mother mountain mouse
move much music must name nation nature near need never next nice night nine noise north note nothing
notice number ocean offer office often once only open orange order other over page paint paper parent
part party pass past path people perfect perhaps person picture piece place plain plan plant play please
point police poor popular position possible power present pretty price problem produce program purple
question quick quiet race radio rain reach read ready real reason record remember rest result rich ride
right ring river road rock room round rule safe said same save school science score season second seen
sell send sense sentence serve seven several shape share sharp ship shop short should show side sign
silver simple since sing single sister size skin sleep slow small smile snow soft soldier some song soon
sound south space speak special speed spell spring square stand star start state station stay steel step
still stone stood stop store story street strong student study such summer sure surface system table take
talk teacher team tell than that their them then there these they thing think third this those though
thought thousand three through time today together told took tower town track trade train travel tree
trouble true turn under unit until upon used useful usual valley very village visit voice wait walk wall
want warm wash watch water wave weather week weight well went were west what wheel when where which while
white whole wide wife wild will wind window winter wish with woman women wonder wood word work world would
write wrong yard year yellow young your zero
`;

export const commonWords: ReadonlySet<string> = new Set(words.split(/\s+/).filter((w) => w.length >= 4));
