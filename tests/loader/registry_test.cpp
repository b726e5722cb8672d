// The registry's rejections of broken plugins, each with its code and message.
#include "loader/registry/registry.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "core/base/error.h"
#include "test_paths.h"
#include "tests/support/multiprocess.h"

using ddph::loader::Registry;
using ddph_test::fixture_dir;

namespace {

// Loads family from the one fixture case dir; returns the error (code, text).
ddph::Error load_error(const std::string& case_dir, const std::string& family) {
  Registry registry({fixture_dir(case_dir)});
  try {
    registry.load(family);
  } catch (const ddph::Error& e) {
    return e;
  }
  return ddph::Error(DDPH_OK, "loaded");
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

}  // namespace

TEST(Registry, LoadsAGoodPluginOnce) {
  Registry registry({fixture_dir("good")});
  const auto& p = registry.load("fixture_sum");
  EXPECT_EQ(p.family(), "fixture_sum");
  EXPECT_EQ(p.file(), fixture_dir("good") + "/libddph_fixture_sum.so");
  EXPECT_NE(p.find_hook("sum"), nullptr);
  EXPECT_EQ(p.find_hook("nope"), nullptr);
  EXPECT_EQ(p.hook_names(), "sum, scale");
  EXPECT_EQ(&registry.load("fixture_sum"), &p);
  EXPECT_NE(registry.load("comm_fake").find_comm("fake"), nullptr);
}

TEST(Registry, MissingPluginListsEverySearchedDirectory) {
  ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", "/nonexistent/a:/nonexistent/b");
  Registry registry({fixture_dir("good"), "/nonexistent/yaml"});
  try {
    registry.load("no_such_family");
    FAIL() << "loaded a missing plugin";
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_NOT_FOUND);
    EXPECT_HAS(e.what(), "libddph_no_such_family.so");
    EXPECT_HAS(e.what(), fixture_dir("good"));
    EXPECT_HAS(e.what(), "/nonexistent/yaml");
    EXPECT_HAS(e.what(), "/nonexistent/a");
    EXPECT_HAS(e.what(), "/nonexistent/b");
    EXPECT_HAS(e.what(), DDPH_PLUGIN_INSTALL_DIR_FOR_TEST);
  }
}

TEST(Registry, SearchOrderYamlPathBeatsEnv) {
  {
    ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", fixture_dir("shadow"));
    Registry registry({fixture_dir("good")});
    EXPECT_STREQ(registry.load("fixture_sum").desc().version, "0.1-fixture");
    EXPECT_EQ(registry.dirs()[0], fixture_dir("good"));
    EXPECT_EQ(registry.dirs()[1], fixture_dir("shadow"));
  }
  {
    ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", fixture_dir("good") + ":" + fixture_dir("shadow"));
    Registry registry({fixture_dir("shadow")});
    EXPECT_STREQ(registry.load("fixture_sum").desc().version, "shadow");
  }
  {
    // Without a YAML path, the environment comes first.
    ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", fixture_dir("shadow"));
    Registry registry;
    EXPECT_STREQ(registry.load("fixture_sum").desc().version, "shadow");
  }
}

TEST(Registry, MissingSymbol) {
  ddph::Error e = load_error("nosym", "fixture_nosym");
  EXPECT_EQ(e.code(), DDPH_NOT_FOUND);
  EXPECT_HAS(e.what(), "libddph_fixture_nosym.so");
  EXPECT_HAS(e.what(), "ddph_plugin_entry");
}

TEST(Registry, NotASharedObjectIncludesDlerror) {
  ddph::Error e = load_error("garbage", "fixture_garbage");
  EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(e.what(), "cannot load plugin");
  EXPECT_HAS(e.what(), "libddph_fixture_garbage.so:");  // dlerror() names the file too
}

TEST(Registry, EntryReturningNull) {
  ddph::Error e = load_error("entrynull", "fixture_entrynull");
  EXPECT_EQ(e.code(), DDPH_VERSION_MISMATCH);
  EXPECT_HAS(e.what(), "returned NULL");
}

TEST(Registry, AbiMajorMismatch) {
  ddph::Error e = load_error("abi2", "fixture_abi2");
  EXPECT_EQ(e.code(), DDPH_VERSION_MISMATCH);
  const std::string minor = std::to_string(DDPH_ABI_MINOR);  // the fixture keeps the minor
  EXPECT_HAS(e.what(), "built for ABI 2." + minor);
  EXPECT_HAS(e.what(), "implements ABI 1." + minor);
}

TEST(Registry, NewerMinorStillLoads) {
  Registry registry({fixture_dir("minor")});
  const auto& p = registry.load("fixture_minor");
  EXPECT_EQ(p.desc().abi_minor, 99u);
}

TEST(Registry, PluginStructTooSmall) {
  ddph::Error e = load_error("small", "fixture_small");
  EXPECT_EQ(e.code(), DDPH_VERSION_MISMATCH);
  EXPECT_HAS(e.what(), "ddph_plugin_t.struct_size is 24");
}

TEST(Registry, HookStructTooSmall) {
  ddph::Error e = load_error("smallhook", "fixture_smallhook");
  EXPECT_EQ(e.code(), DDPH_VERSION_MISMATCH);
  EXPECT_HAS(e.what(), "ddph_hook_t hooks[0].struct_size is 16");
}

TEST(Registry, FamilyMismatch) {
  ddph::Error e = load_error("mismatch", "fixture_mismatch");
  EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(e.what(), "'something_else'");
  EXPECT_HAS(e.what(), "'fixture_mismatch'");
}

TEST(Registry, RejectsPathLikeFamilyNames) {
  ddph::Error e = load_error("good", "../good/fixture_sum");
  EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(e.what(), "not a valid name");
}

TEST(Registry, ListsPluginFilesWithShadowing) {
  auto files = ddph::loader::find_plugin_files({fixture_dir("good"), fixture_dir("shadow")});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].family, "comm_fake");
  EXPECT_EQ(files[1].family, "fixture_sum");
  EXPECT_EQ(files[1].path, fixture_dir("good") + "/libddph_fixture_sum.so");
}

namespace {

// A search path with fixture folders standing in for the built-in ones.
ddph::loader::SearchPath fixture_path(std::vector<std::string> given, std::vector<std::string> env,
                                      std::vector<std::string> builtin) {
  ddph::loader::SearchPath path;
  path.given = std::move(given);
  path.env = std::move(env);
  path.builtin = std::move(builtin);
  return path;
}

ddph::loader::PluginPolicy replacing(std::vector<std::string> families) {
  ddph::loader::PluginPolicy policy;
  policy.replace_builtin = std::move(families);
  return policy;
}

}  // namespace

// Issue 21: a job folder's copy of a built-in family used to replace it silently.
TEST(Registry, ABuiltInFamilyIsReplacedOnlyWhenThePolicyNamesIt) {
  const std::string builtin = fixture_dir("good") + "/libddph_fixture_sum.so";
  const std::string other = fixture_dir("shadow") + "/libddph_fixture_sum.so";
  for (bool from_env : {false, true}) {
    auto path = from_env ? fixture_path({}, {fixture_dir("shadow")}, {fixture_dir("good")})
                         : fixture_path({fixture_dir("shadow")}, {}, {fixture_dir("good")});
    Registry refusing(path, replacing({"comm_gloo"}));
    try {
      refusing.load("fixture_sum");
      FAIL() << "used " << other << " without replace_builtin";
    } catch (const ddph::Error& e) {
      EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
      EXPECT_HAS(e.what(), "plugin family 'fixture_sum' is built in (" + builtin + ")");
      EXPECT_HAS(e.what(), other + " (from " + (from_env ? "DDPH_PLUGIN_PATH" : "plugin_path") +
                               ") comes first");
      EXPECT_HAS(e.what(), "add `replace_builtin: [fixture_sum]`");
    }
    Registry allowed(path, replacing({"fixture_sum"}));
    EXPECT_EQ(allowed.choose("fixture_sum").path, other);
    EXPECT_STREQ(allowed.load("fixture_sum").desc().version, "shadow");
  }
  // A family that is not built in comes from plugin_path as before, and a
  // built-in family with no other copy needs no leave.
  Registry registry(fixture_path({fixture_dir("shadow")}, {}, {fixture_dir("v1_0")}),
                    ddph::loader::PluginPolicy{});
  EXPECT_EQ(registry.choose("comm_fake").origin, ddph::loader::PluginOrigin::kBuiltin);
  Registry plain(fixture_path({fixture_dir("shadow")}, {}, {fixture_dir("minor")}),
                 ddph::loader::PluginPolicy{});
  EXPECT_STREQ(plain.load("fixture_sum").desc().version, "shadow");
}

TEST(Registry, AFolderThatIsABuiltInOneHoldsBuiltInFiles) {
  // DDPH_PLUGIN_PATH set to the built-in folder, spelled differently.
  Registry registry(fixture_path({}, {fixture_dir("good") + "/../good/"}, {fixture_dir("good")}),
                    ddph::loader::PluginPolicy{});
  const auto copies = registry.copies("fixture_sum");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].origin, ddph::loader::PluginOrigin::kBuiltin);
  EXPECT_NO_THROW(registry.load("fixture_sum"));
}

TEST(Registry, CopiesListsEveryFolderInSearchOrder) {
  Registry registry(
      fixture_path({fixture_dir("shadow")}, {fixture_dir("v1_0")}, {fixture_dir("good")}),
      replacing({"fixture_sum"}));
  const auto copies = registry.copies("fixture_sum");
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[0].path, fixture_dir("shadow") + "/libddph_fixture_sum.so");
  EXPECT_EQ(copies[0].origin, ddph::loader::PluginOrigin::kGiven);
  EXPECT_EQ(copies[1].origin, ddph::loader::PluginOrigin::kEnv);
  EXPECT_EQ(copies[2].origin, ddph::loader::PluginOrigin::kBuiltin);
}

TEST(Registry, LoadingAShadowedFamilyLogsAWarning) {
  Registry registry({fixture_dir("good"), fixture_dir("shadow")});
  testing::internal::CaptureStderr();
  registry.load("fixture_sum");
  registry.load("comm_fake");  // one copy: nothing to say
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_HAS(err,
             "ddph warn: plugin family 'fixture_sum' is in 2 folders of the search path: "
             "using " +
                 fixture_dir("good") + "/libddph_fixture_sum.so (plugin_path), not " +
                 fixture_dir("shadow") + "/libddph_fixture_sum.so (plugin_path)");
  EXPECT_EQ(err.find("comm_fake"), std::string::npos) << err;
}

TEST(Registry, ABuiltInFolderOnTheEnvPathStaysBuiltIn) {
  // As the tests set DDPH_PLUGIN_PATH: to the built-in folder itself.
  Registry registry(
      fixture_path({fixture_dir("shadow")}, {fixture_dir("good")}, {fixture_dir("good")}),
      ddph::loader::PluginPolicy{});
  ASSERT_EQ(registry.dirs().size(), 2u);
  EXPECT_EQ(registry.choose("comm_fake").origin, ddph::loader::PluginOrigin::kBuiltin);
  EXPECT_THROW(registry.choose("fixture_sum"), ddph::Error);  // shadow's copy needs leave
}

// Issue 38, case 16: a plugin's constructors run at dlopen, so a plugin that
// another user could have written is refused before it is opened, by the
// rule file stores are held to (core/base/private_path.h).
namespace {

const std::string kFixtureSum = "libddph_fixture_sum.so";

// A folder of mode dir_mode holding a copy of the good fixture of mode
// file_mode; returns the folder.
// The folders these tests make, removed when the test program ends.
std::string trust_temp_dir() {
  static std::vector<std::string> made;
  static const struct Remover {
    ~Remover() {
      for (const std::string& d : made) std::system(("rm -rf '" + d + "'").c_str());
    }
  } remover;
  made.push_back(ddph_test::make_temp_dir("ddph-trust"));
  return made.back();
}

std::string plugin_folder(mode_t dir_mode, mode_t file_mode) {
  const std::string dir = trust_temp_dir() + "/plugins";
  EXPECT_EQ(mkdir(dir.c_str(), 0700), 0);
  {
    std::ifstream in(fixture_dir("good") + "/" + kFixtureSum, std::ios::binary);
    std::ofstream out(dir + "/" + kFixtureSum, std::ios::binary);
    out << in.rdbuf();
  }
  EXPECT_EQ(chmod((dir + "/" + kFixtureSum).c_str(), file_mode), 0);
  EXPECT_EQ(chmod(dir.c_str(), dir_mode), 0);
  return dir;
}

// Loads fixture_sum from dir, given as a YAML plugin_path or in
// DDPH_PLUGIN_PATH; "" when it loaded, else the error's text.
std::string load_from(const std::string& dir, bool from_env) {
  ddph_test::ScopedEnv env("DDPH_PLUGIN_PATH", from_env ? dir : "");
  Registry registry(from_env ? std::vector<std::string>{} : std::vector<std::string>{dir});
  try {
    registry.load("fixture_sum");
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  return "";
}

bool is_open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h != nullptr) dlclose(h);
  return h != nullptr;
}

}  // namespace

TEST(RegistryTrust, AFolderOrFileOthersMayWriteIsRefusedBeforeDlopen) {
  for (bool from_env : {false, true}) {
    const char* origin = from_env ? "from DDPH_PLUGIN_PATH" : "from plugin_path";
    const std::string open_dir = plugin_folder(0777, 0644);
    std::string err = load_from(open_dir, from_env);
    EXPECT_HAS(err, "plugin family 'fixture_sum' (" + open_dir + "/" + kFixtureSum + ", " + origin +
                        ") not loaded");
    EXPECT_HAS(err, "its folder " + open_dir + " has mode 0777");
    EXPECT_HAS(err, "chmod go-w " + open_dir);
    EXPECT_HAS(err, "DDPH_ALLOW_UNSAFE_PLUGIN_PATH=1");
    EXPECT_FALSE(is_open(open_dir + "/" + kFixtureSum)) << "its constructors ran";

    const std::string open_file = plugin_folder(0755, 0666);
    err = load_from(open_file, from_env);
    EXPECT_HAS(err, "the file " + open_file + "/" + kFixtureSum + " has mode 0666");
    EXPECT_FALSE(is_open(open_file + "/" + kFixtureSum));

    // Group-writable is as open as world-writable.
    err = load_from(plugin_folder(0775, 0644), from_env);
    EXPECT_HAS(err, "has mode 0775");

    // Private folders of this user load as before.
    EXPECT_EQ(load_from(plugin_folder(0755, 0644), from_env), "");
    EXPECT_EQ(load_from(plugin_folder(0700, 0755), from_env), "");
  }
}

TEST(RegistryTrust, APluginOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const std::string dir = plugin_folder(0755, 0644);
  ASSERT_EQ(chown((dir + "/" + kFixtureSum).c_str(), 65534, 65534), 0);
  std::string err = load_from(dir, false);
  EXPECT_HAS(err, "the file " + dir + "/" + kFixtureSum + " belongs to ");
  EXPECT_HAS(err, "(uid 65534), not to this user");
  const std::string theirs = plugin_folder(0755, 0644);
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
  err = load_from(theirs, true);
  EXPECT_HAS(err, "its folder " + theirs + " belongs to ");
  EXPECT_FALSE(is_open(theirs + "/" + kFixtureSum));
}

TEST(RegistryTrust, ALinkIsJudgedByTheFileItLeadsTo) {
  const std::string open_dir = plugin_folder(0777, 0644);
  const std::string mine = trust_temp_dir();
  ASSERT_EQ(symlink((open_dir + "/" + kFixtureSum).c_str(), (mine + "/" + kFixtureSum).c_str()), 0);
  const std::string err = load_from(mine, false);
  EXPECT_HAS(err, "its folder " + open_dir + " has mode 0777");
  // A link in an open folder to a file of this user's loads: the file judged,
  // links resolved, is the file opened, so swapping the link changes nothing.
  const std::string good = plugin_folder(0755, 0644);
  const std::string open_links = plugin_folder(0777, 0644);
  const std::string link = open_links + "/" + kFixtureSum;
  ASSERT_EQ(unlink(link.c_str()), 0);
  ASSERT_EQ(symlink((good + "/" + kFixtureSum).c_str(), link.c_str()), 0);
  EXPECT_EQ(load_from(open_links, false), "");
}

TEST(RegistryTrust, TheOptOutLoadsWithAWarning) {
  const std::string dir = plugin_folder(0777, 0666);
  ddph_test::ScopedEnv allow("DDPH_ALLOW_UNSAFE_PLUGIN_PATH", "1");
  testing::internal::CaptureStderr();
  EXPECT_EQ(load_from(dir, false), "");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_HAS(err, "ddph warn: plugin family 'fixture_sum' (" + dir + "/" + kFixtureSum +
                      ", from plugin_path) loaded although");
  // Only "1" opts out.
  ddph_test::ScopedEnv other("DDPH_ALLOW_UNSAFE_PLUGIN_PATH", "yes");
  EXPECT_HAS(load_from(plugin_folder(0777, 0644), false), "not loaded");
}

// The tests load the build's own plugins and fixtures: a build made with
// umask 022 passes the rule (with 002 set DDPH_ALLOW_UNSAFE_PLUGIN_PATH=1).
TEST(RegistryTrust, TheBuildsOwnFoldersPassTheRule) {
  EXPECT_EQ(
      ddph::loader::untrusted_plugin_reason(std::string(DDPH_PLUGIN_DIR) + "/libddph_default.so"),
      "");
  EXPECT_EQ(ddph::loader::untrusted_plugin_reason(fixture_dir("good") + "/" + kFixtureSum), "");
}
